--- bench/one_input.lua — the common entry of the op-family bench files: an op on one randn input
-- of the given shape, timed in milliseconds beside the same op in PyTorch.
-- one_input(ctx, entries, max, rounds)(key, name, shape, expr_dle, expr_torch) appends an entry
-- whose target is at most max times PyTorch's time, measured over rounds (default 3) alternating
-- rounds; expr_torch is Python over x (the statement timed).
local vs_torch = require("bench.vs_torch")

return function(ctx, entries, max, rounds)
  local dle = ctx.dle
  return function(key, name, shape, expr_dle, expr_torch)
    entries[#entries + 1] = vs_torch(key, name, max, rounds or 3, function()
      local x = dle.randn(table.unpack(shape))
      return function() return expr_dle(x) end
    end, "x = torch.randn(" .. table.concat(shape, ", ") .. ")", expr_torch)
  end
end
